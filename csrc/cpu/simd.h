// Portable SIMD on GCC vector extensions. Included once per instruction set
// (inside that set's namespace) with DLMSVDD_VEC_BYTES = 16, 32 or 64; the
// compiler flags of the including file decide which instructions come out.
// No include guard: each instruction set includes it once, in its own namespace.

template <typename T>
struct Simd;

template <>
struct Simd<float> {
  static constexpr int W = DLMSVDD_VEC_BYTES / 4;
  typedef float V __attribute__((vector_size(DLMSVDD_VEC_BYTES)));
  typedef int32_t I __attribute__((vector_size(DLMSVDD_VEC_BYTES)));
  using Int = int32_t;
};

template <>
struct Simd<double> {
  static constexpr int W = DLMSVDD_VEC_BYTES / 8;
  typedef double V __attribute__((vector_size(DLMSVDD_VEC_BYTES)));
  typedef int64_t I __attribute__((vector_size(DLMSVDD_VEC_BYTES)));
  using Int = int64_t;
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
