// Each op's bindings add their functions to the module (bindings/<op>_bindings.cpp).
#pragma once
#include <pybind11/pybind11.h>

namespace dlmsvdd::bindings {

void bind_rbf(pybind11::module_& m);
void bind_dual(pybind11::module_& m);
void bind_dual_apg(pybind11::module_& m);
void bind_fwht(pybind11::module_& m);
void bind_feature_map(pybind11::module_& m);
void bind_rpcholesky(pybind11::module_& m);
void bind_matvec(pybind11::module_& m);

}  // namespace dlmsvdd::bindings
