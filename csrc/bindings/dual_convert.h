// The dual's Python conversions, shared by its bindings (dual_bindings.cpp,
// dual_apg_bindings.cpp): the coefficient dict in, the oracle's record out.
#pragma once
#include <pybind11/pybind11.h>

#include "bindings/dlpack_bridge.h"
#include "common/dual_math.h"

namespace dlmsvdd::bindings {

template <typename T>
inline DualCoefs<T> coefs_from(const py::dict& d) {
  DualCoefs<T> c;
  c.q = d["q"].cast<T>();
  c.pen_normal = d["pen_normal"].cast<T>();
  c.pen_anomaly = d["pen_anomaly"].cast<T>();
  c.mu_normal = d["mu_normal"].cast<T>();
  c.mu_anomaly = d["mu_anomaly"].cast<T>();
  return c;
}

template <typename T>
py::dict oracle_dict(const OracleResult<T>& r, const DualCoefs<T>& c) {
  py::dict d;
  d["fw_normal"] = r.fw_normal;
  d["fw_anomaly"] = r.fw_anomaly;
  d["away_normal"] = r.away_normal;
  d["away_anomaly"] = r.away_anomaly;
  d["g_fw_normal"] = double(r.g_fw_normal);
  d["g_fw_anomaly"] = double(r.g_fw_anomaly);
  d["g_away_normal"] = double(r.g_away_normal);
  d["g_away_anomaly"] = double(r.g_away_anomaly);
  d["alpha_dot_g"] = r.alpha_dot_g;
  d["quadratic"] = r.quadratic;
  d["penalty"] = r.penalty;
  d["objective"] = r.objective();
  d["gap"] = r.gap(c);
  return d;
}

}  // namespace dlmsvdd::bindings
