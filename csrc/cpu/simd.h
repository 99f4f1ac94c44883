// Portable SIMD on GCC vector extensions. Included once per instruction set
// (inside that set's namespace) with DLMSVDD_VEC_BYTES = 16, 32 or 64; the
// compiler flags of the including file decide which instructions come out.
// No include guard: each instruction set includes it once, in its own namespace
// (after <cstdint> and <type_traits>).

// T's vector (V, W lanes) and the integer vector of the same lane width (I, lanes of Int).
template <typename T>
struct Simd {
  static_assert(std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8), "float or double lanes");
  static constexpr int W = int(DLMSVDD_VEC_BYTES / sizeof(T));
  using Int = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(DLMSVDD_VEC_BYTES)));
  typedef Int I __attribute__((vector_size(DLMSVDD_VEC_BYTES)));
};

template <typename T>
using VecOf = typename Simd<T>::V;

template <typename T>
__attribute__((always_inline)) inline VecOf<T> vload(const T* p) {
  VecOf<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
__attribute__((always_inline)) inline void vstore(T* p, VecOf<T> v) {
  __builtin_memcpy(p, &v, sizeof v);
}

template <typename T, size_t... L>
__attribute__((always_inline)) inline VecOf<T> vbroadcast_impl(T s, std::index_sequence<L...>) {
  return VecOf<T>{((void)L, s)...};
}

// An initializer list gives a clean broadcast; `zero + s` would be a real
// addition without -ffast-math, and a lane loop compiles to inserts.
template <typename T>
__attribute__((always_inline)) inline VecOf<T> vbroadcast(T s) {
  return vbroadcast_impl<T>(s, std::make_index_sequence<Simd<T>::W>{});
}

template <typename T>
inline T vsum(VecOf<T> v) {
  T s = 0;
  for (int l = 0; l < Simd<T>::W; ++l) s += v[l];
  return s;
}

// exp for x <= 0 (the RBF range); results below the smallest normal become 0.
// Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, then 2^n from the exponent bits.
__attribute__((always_inline)) inline VecOf<float> vexp(VecOf<float> x) {
  using V = VecOf<float>;
  using I = Simd<float>::I;
  const V lo = vbroadcast(-87.5f);
  const V xc = x < lo ? lo : x;
  const V magic = vbroadcast(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V t = xc * 1.44269504088896341f + magic;
  const V n = t - magic;
  V r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  // Cephes expf polynomial, about 1 ulp on |r| <= ln2/2.
  V p = vbroadcast(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I e = (((I)t - (I)magic) + 127) << 23;
  const V res = p * (V)e;
  const V zero = {};
  return x < lo ? zero : res;
}

__attribute__((always_inline)) inline VecOf<double> vexp(VecOf<double> x) {
  using V = VecOf<double>;
  using I = Simd<double>::I;
  const V lo = vbroadcast(-708.0);
  const V xc = x < lo ? lo : x;
  const V magic = vbroadcast(6755399441055744.0);  // 1.5 * 2^52
  const V t = xc * 1.4426950408889634074 + magic;
  const V n = t - magic;
  V r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  // Taylor to degree 12: truncation below 2e-16 on |r| <= ln2/2.
  V p = vbroadcast(1.0 / 479001600.0);
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const I e = (((I)t - (I)magic) + 1023) << 52;
  const V res = p * (V)e;
  const V zero = {};
  return x < lo ? zero : res;
}

// cos(n pi/2 + r) from the quadrant n and the reduced r, |r| <= pi/4: cos r,
// -sin r, -cos r, sin r for n = 0, 1, 2, 3 mod 4 (the sign is an XOR of the
// sign bit: bit 1 of n + 1).
template <typename T>
__attribute__((always_inline)) inline VecOf<T> cos_from_quadrant(typename Simd<T>::I n, VecOf<T> sin_r,
                                                                 VecOf<T> cos_r) {
  using I = typename Simd<T>::I;
  const I zero = {};
  const VecOf<T> v = (n & 1) == zero ? cos_r : sin_r;
  const I flip = ((n + 1) & 2) << (8 * sizeof(T) - 2);
  return (VecOf<T>)((I)v ^ flip);
}

// cos for |x| <= kVcosMaxArg<T>; callers take std::cos beyond (and for
// infinities). Cody-Waite reduction x = n pi/2 + r with pi/2 split in three
// parts whose products with n are exact in that range (the first two have 8
// and 11 significant bits in float, 31 and 32 in double), then the Cephes
// sin and cos polynomials on |r| <= pi/4: within a few ulps of 1.
template <typename T>
inline constexpr T kVcosMaxArg = sizeof(T) == 4 ? T(8192) : T(1 << 20);

__attribute__((always_inline)) inline VecOf<float> vcos(VecOf<float> x) {
  using V = VecOf<float>;
  using I = Simd<float>::I;
  const V magic = vbroadcast(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V t = x * 0.636619772367581343f + magic;
  const V n = t - magic;
  V r = x - n * 1.5703125f;
  r = r - n * 4.837512969970703125e-4f;
  r = r - n * 7.54978995489188216e-8f;
  const V z = r * r;
  V s = vbroadcast(-1.9515295891e-4f);
  s = s * z + 8.3321608736e-3f;
  s = s * z - 1.6666654611e-1f;
  s = s * z * r + r;
  V c = vbroadcast(2.443315711809948e-5f);
  c = c * z - 1.388731625493765e-3f;
  c = c * z + 4.166664568298827e-2f;
  c = c * z * z - z * 0.5f + 1.0f;
  return cos_from_quadrant<float>((I)t - (I)magic, s, c);
}

__attribute__((always_inline)) inline VecOf<double> vcos(VecOf<double> x) {
  using V = VecOf<double>;
  using I = Simd<double>::I;
  const V magic = vbroadcast(6755399441055744.0);  // 1.5 * 2^52
  const V t = x * 0.63661977236758134308 + magic;
  const V n = t - magic;
  V r = x - n * 1.57079632673412561417e+00;
  r = r - n * 6.07710050630396597660e-11;
  r = r - n * 2.02226624879595063154e-21;
  const V z = r * r;
  V s = vbroadcast(1.58962301576546568060e-10);
  s = s * z - 2.50507477628578072866e-8;
  s = s * z + 2.75573136213857245213e-6;
  s = s * z - 1.98412698295895385996e-4;
  s = s * z + 8.33333333332211858878e-3;
  s = s * z - 1.66666666666666307295e-1;
  s = s * z * r + r;
  V c = vbroadcast(-1.13585365213876817300e-11);
  c = c * z + 2.08757008419747316778e-9;
  c = c * z - 2.75573141792967388112e-7;
  c = c * z + 2.48015872888517045348e-5;
  c = c * z - 1.38888888888730564116e-3;
  c = c * z + 4.16666666666665929218e-2;
  c = c * z * z - z * 0.5 + 1.0;
  return cos_from_quadrant<double>((I)t - (I)magic, s, c);
}
