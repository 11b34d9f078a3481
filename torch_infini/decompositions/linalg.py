"""``linalg_matrix_exp`` for the Infini stack, which InfiniOps lacks and
PyTorch does not decompose.

CPU's kernel (``mexp`` in ATen's ``LinearAlgebra.cpp``) follows Bader,
Blanes and Casas, "Computing the Matrix Exponential with an Optimized Taylor
Polynomial Approximation" (Mathematics 2019, 7, 1174): each matrix's
operator 1-norm picks a Taylor polynomial of degree 1, 2, 4, 8 or 12
evaluated with few products, or degree 18 on the matrix scaled by a power of
two, then squared back. This computes the same polynomials with the same
products from the paper's coefficients, so it differs from CPU only in the
rounding of its sums (within the dtype's tolerance). The norms are read
back to choose, as CPU's kernel reads them. The registry is
``torch_infini/decompositions/__init__.py``.
"""

from __future__ import annotations

import math

import torch

# The largest operator 1-norm each degree (1, 2, 4, 8, 12, 18) serves.
_THETAS = {
    torch.float32: (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02, 5.800524627688768e-01,
                    1.461661507209034e+00, 3.010066362817634e+00),
    torch.float64: (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04, 4.991228871115323e-02,
                    2.996158913811580e-01, 1.090863719290036e+00),
}

# Degree 12: B_i = sum_j b[i][j] A^j over {I, A, A^2, A^3}.
_B12 = ((9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
        (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
        (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
        (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359))

# Degree 18: B_i = sum_j b[i][j] A^j over {I, A, A^2, A^3, A^6}.
_B18 = ((0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
        (0.0, 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
         -6.37898194594723280150e-04),
        (-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
         -6.98210122488052056106e-03, 3.34975017086070470649e-05),
        (-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
         2.95552570429315521194e-02, -1.39180257516060693404e-05),
        (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05))


def _combination(powers: list[torch.Tensor], coefficients: tuple[float, ...]) -> torch.Tensor:
    out = powers[0] * coefficients[0]
    for power, c in zip(powers[1:], coefficients[1:]):
        out = out + power * c
    return out


def _identity_like(a: torch.Tensor) -> torch.Tensor:
    n = a.shape[-1]
    return torch.eye(n, dtype=a.dtype).to(a.device).expand(a.shape)


def _taylor(a: torch.Tensor, degree: int) -> torch.Tensor:
    """The degree's polynomial of the batch ``a`` (``(B, n, n)``)."""
    eye = _identity_like(a)
    a2 = a @ a if degree > 1 else None
    if degree == 1:
        return eye + a
    if degree == 2:
        return eye + a + a2 / 2.0
    if degree == 4:
        return eye + a + a2 @ (eye / 2.0 + a / 6.0 + a2 / 24.0)
    if degree == 8:
        sqrt_177 = 0.1330413469565007072504e+2
        x3 = 2.0 / 3.0
        x1, x2 = x3 * ((1.0 + sqrt_177) / 88.0), x3 * ((1.0 + sqrt_177) / 352.0)
        x4 = (-271.0 + 29.0 * sqrt_177) / (315.0 * x3)
        x5 = (-11.0 + 11.0 * sqrt_177) / (1260.0 * x3)
        x6 = (-99.0 + 11.0 * sqrt_177) / (5040.0 * x3)
        # x3 squared: the paper's coefficient, as PyTorch corrected it (pytorch/pytorch#196658).
        x7 = (89.0 - sqrt_177) / (5040.0 * x3 * x3)
        y2 = (857.0 - 58.0 * sqrt_177) / 630.0
        a4 = a2 @ (x1 * a + x2 * a2)
        a8 = (x3 * a2 + a4) @ (x4 * eye + x5 * a + x6 * a2 + x7 * a4)
        return eye + a + y2 * a2 + a8
    a3 = a @ a2
    if degree == 12:
        b = [_combination([eye, a, a2, a3], row) for row in _B12]
        b2 = b[2] + b[3] @ b[3]  # with A^6
        return b[0] + (b[1] + b2) @ b2
    powers = [eye, a, a2, a3, a3 @ a3]
    b = [_combination(powers, row) for row in _B18]
    b3 = b[3] + b[0] @ b[4]  # with A^9
    return b[1] + (b[2] + b3) @ b3


def matrix_exp(a: torch.Tensor) -> torch.Tensor:
    """``linalg_matrix_exp`` of float32/float64 square matrices (CPU's
    errors for others come from the meta function)."""
    if a.dtype not in _THETAS:
        raise NotImplementedError(f"aten::linalg_matrix_exp: decomposed here for float32 and float64, not {a.dtype}")
    n = a.shape[-1]
    if n == 1 or a.numel() == 0:
        return a.exp() if n == 1 else a.clone()
    flat = a.reshape(-1, n, n)
    thetas = _THETAS[a.dtype]
    norms = flat.abs().sum(-2).amax(-1).tolist()  # operator 1-norms, read back as CPU's kernel reads them
    parts: list[tuple[list[int], torch.Tensor]] = []
    for i, degree in enumerate((1, 2, 4, 8, 12)):
        low = -1.0 if i == 0 else thetas[i - 1]
        # CPU's last interval is open above: a norm at its bound is scaled and squared.
        members = [k for k, v in enumerate(norms) if low < v <= thetas[i] and not v >= thetas[4]]
        if members:
            parts.append((members, _taylor(flat[members], degree)))
    large = [k for k, v in enumerate(norms) if v >= thetas[4]]
    for k in large:
        s = max(0, math.ceil(math.log2(norms[k] / thetas[5])))
        m = _taylor(flat[k:k + 1] / float(2 ** s), 18)
        for _ in range(s):
            m = m @ m
        parts.append(([k], m))
    out = torch.full_like(flat, float("nan"))  # a NaN norm picks no degree (CPU leaves such a result unset)
    for members, values in parts:
        out[members] = values
    return out.view(a.shape)
