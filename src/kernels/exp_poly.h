// e^x on a SIMD vector of floats, written once for every width: `S` is a
// struct of static functions over one register type of floats (S::F),
// defined by the file that uses it, so the AVX2 and AVX-512 files compute
// the same bits lane by lane. Each instantiation is its own function
// (the S types differ), so no copy built with one file's instruction set can
// stand in for another's.
//
// x is clamped to [-87, 88], so the result is a normal float (e^-87 to
// e^88, below FLT_MAX). x = n·ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 in
// a short high part and a correction), e^r by its Taylor series to r^6
// (relative error < 2e-7 on that range), times 2^n (S::times_pow2). The
// product is a normal float on the clamped range, so it is exact however
// S builds it: the exponent field by hand, or one vscalefps.
#pragma once

#include <initializer_list>

namespace kvlab::kernels {

template <class S>
[[gnu::always_inline]] inline typename S::F exp_poly(typename S::F x) {
  x = S::min(S::max(x, S::set1(-87.0f)), S::set1(88.0f));
  const typename S::F n = S::round(S::mul(x, S::set1(1.44269504f)));
  typename S::F r = S::fnmadd(n, S::set1(0.693359375f), x);
  r = S::fnmadd(n, S::set1(-2.12194440e-4f), r);
  typename S::F e = S::set1(1.0f / 720);
  for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) e = S::fmadd(e, r, S::set1(c));
  return S::times_pow2(e, n);
}

}  // namespace kvlab::kernels
