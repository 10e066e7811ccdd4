"""A PyTorch user's first hour, written the torch way: every line runs, with torch's meaning."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework import nn
from framework.data import DataLoader
from framework.optim import SGD


class Pairs:
    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3)).astype(np.float32)
        self.y = (self.x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def test_the_first_hour(tmp_path):
    sg.manual_seed(0)
    sg.set_num_threads(sg.get_num_threads())
    device = "cpu"
    model = nn.Linear(3, 1)
    optimizer = SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Pairs(32), batch_size=4, shuffle=True)
    first = None
    for epoch in range(5):
        for x, y in loader:
            x, y = sg.tensor(x).to(device), sg.tensor(y).to(device)
            pred = model(x)
            loss = ((pred - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            first = loss.item() if first is None else first
    assert loss.item() < 0.01 * first
    x = sg.tensor(Pairs(4).x)
    assert x.size() == (4, 3) and x.size(1) == 3 and x.numel() == 12
    assert x.sum(dim=1, keepdim=True).shape == (4, 1) and x.unsqueeze(0).shape == (1, 4, 3)
    assert x.mean(dim=0).shape == (3,) and x.argmax(dim=1).shape == (4,)
    np.testing.assert_allclose(F.softmax(x, dim=-1).sum(dim=-1).numpy(), 1.0, rtol=1e-6)
    before = model.weight.numpy().copy()
    with sg.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
    np.testing.assert_array_equal(model.weight.numpy(), before * 0.5)
    sg.save(model.state_dict(), tmp_path / "model.pth")
    again = nn.Linear(3, 1)
    again.load_state_dict(sg.load(tmp_path / "model.pth"))
    np.testing.assert_array_equal(again.weight.numpy(), model.weight.numpy())
    sg.save(optimizer.state_dict(), tmp_path / "opt.pth")
    SGD(again.parameters(), lr=0.1).load_state_dict(sg.load(tmp_path / "opt.pth"))


def test_import_framework_loads_its_subpackages():
    """`import torch` makes torch.optim and torch.nn reachable; `import framework` does the same."""
    import subprocess
    import sys
    code = ("import framework as sg; print(sg.optim.Adam.__name__, sg.nn.Conv2d.__name__, "
            "sg.data.DataLoader.__name__, sg.functional.conv2d.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Adam", "Conv2d", "DataLoader", "conv2d"]


def test_top_level_names_a_torch_user_reaches_for():
    x = sg.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
    for name in ("cat", "stack", "where", "clamp", "exp", "log", "sqrt", "abs", "sum", "mean",
                 "max", "min", "matmul", "maximum", "minimum", "pow", "argmax", "argmin", "var",
                 "std", "flatten", "reshape", "permute", "transpose", "squeeze", "unsqueeze",
                 "chunk", "split", "roll", "relu", "sigmoid", "tanh", "softmax", "log_softmax"):
        assert getattr(sg, name) is getattr(F, name), name  # the same functions, differentiable
    assert sg.cat([x, x], dim=1).shape == (2, 4) and sg.stack([x, x]).shape == (2, 2, 2)
    y = sg.where(x > 0, x, sg.zeros_like(x)).sum() + sg.clamp(x, min=0).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 0.0], [2.0, 2.0]])
    assert sg.clip is sg.clamp and sg.is_tensor(x) and not sg.is_tensor(x.numpy())
    assert sg.numel(x) == 4 and sg.allclose(x, x.detach() + 1e-9) and sg.equal(x, x.detach())
    assert not sg.equal(x, sg.ones(2, 2)) and not sg.equal(x, x[0])
    with sg.inference_mode():
        assert not (x * 2).requires_grad
    assert sg.float32 == np.float32 and sg.float == np.float32 and sg.long == np.int64
    assert sg.get_default_dtype() == np.float32
    assert x.to(sg.float64).dtype == np.float64 and sg.ones(2, dtype=sg.long).dtype == np.int64


def test_device_and_cuda_read_as_in_torch():
    device = sg.device("cuda" if sg.cuda.is_available() else "cpu")
    assert device.type == "cpu" and sg.cuda.device_count() == 0
    sg.cuda.manual_seed_all(0)  # nothing to seed: a no-op, as torch without a GPU
    model = nn.Linear(2, 1).to(device)
    x = sg.randn(3, 2, device=device)
    assert model(x).shape == (3, 1) and x.to(device).device == "cpu"
    with pytest.raises(ValueError, match="srgrad runs on the CPU only"):
        model.to(sg.device("cuda"))


def test_tensor_dtype_rules_are_torchs():
    """torch.tensor keeps a float64 numpy array float64, makes Python floats float32, and torch
    has float16 where srgrad's kernels do not: refused with a clear message, never cast."""
    assert sg.tensor(np.random.rand(2, 3)).dtype == np.float64
    assert sg.tensor([0.5, 1.5]).dtype == np.float32 and sg.tensor(2.0).dtype == np.float32
    assert sg.tensor(np.ones(2, np.float32)).dtype == np.float32
    assert sg.tensor([1, 2]).dtype == np.int64 and sg.tensor([True]).dtype == np.bool_
    for make in (lambda: sg.tensor(np.ones(2, np.float16)), lambda: sg.tensor([1.0], dtype=sg.half),
                 lambda: sg.from_numpy(np.ones(2, np.float16)), lambda: sg.ones(2).half(),
                 lambda: nn.Parameter(np.ones(2, np.float16)), lambda: sg.ones(2).to(sg.float16)):
        with pytest.raises(ValueError, match="float16 is not supported"):
            make()
    with pytest.raises(ValueError, match="dtype complex128 is not supported"):
        sg.tensor(np.ones(2, complex))


def test_tensor_methods_a_torch_user_reaches_for():
    x = sg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]] and x.t().shape == (3, 2)
    assert x.add(1, alpha=2).tolist()[0] == [3.0, 4.0, 5.0] and x.sub(x).numpy().sum() == 0
    assert x.mul(2).div(4).neg().tolist()[1] == [-2.0, -2.5, -3.0]
    assert x.long().dtype == np.int64 and x.int().dtype == np.int32 and x.bool().dtype == np.bool_
    assert x.type() == "float32" and x.type(np.float64).dtype == np.float64
    assert x.is_floating_point() and not x.long().is_floating_point() and x.element_size() == 4
    assert x.new_zeros(2).dtype == np.float32 and x.new_ones((1, 2)).tolist() == [[1.0, 1.0]]
    assert x.new_full((2,), 7.0).tolist() == [7.0, 7.0] and x.new_tensor([1]).dtype == np.float32
    np.testing.assert_allclose(x.sigmoid().numpy(), 1 / (1 + np.exp(-x.numpy())), rtol=1e-6)
    assert x.relu().tanh().shape == (2, 3) and x.maximum(sg.full((3,), 2.5)).numpy().min() == 2.5
    with pytest.raises(ValueError, match="t: expects a tensor with <= 2 dimensions"):
        sg.zeros(1, 2, 3).t()


# -- torch-habit probes (issue 42): each snippet runs as written with T = torch and T = framework;
# the results (values, dtypes, shapes, or the fact of an error) must agree. `out` is the result;
# t(...) is T.tensor, R(*shape) a seeded float32 array, F is T.nn.functional, nn is T.nn.
PROBES = {
    # == and != are element-wise (the silent trap of issue 42)
    "eq_clone": "a = t([1., 2., 3.]); out = a == a.clone()",
    "ne_clone": "a = t([1., 2., 3.]); out = a != a.clone()",
    "eq_where": "a, b = t([1., 2., 3.]), t([0., 5., 3.]); out = T.where(a == b, a, 0 * a)",
    "eq_mask_index": "a, b = t([1., 2., 3.]), t([0., 5., 3.]); out = a[a == b]",
    "eq_times": "a, b = t([1., 2., 3.]), t([0., 5., 3.]); out = (a * (a == b)).sum()",
    "accuracy": "p, y = t([0, 2, 1, 1]), t([0, 1, 1, 1]); out = (p == y).float().mean()",
    "eq_scalar": "out = t([1, 2, 3]) == 2",
    "ne_scalar": "out = t([1., 2., 3.]) != 2.0",
    "eq_int_float": "out = t([1, 2]) == t([1., 2.5])",
    "eq_broadcast": "out = t([[1.], [2.]]) == t([1., 2., 3.])",
    "eq_none": "out = (t([1., 2.]) == None, t([1., 2.]) != None)",
    "eq_function": "out = T.eq(t([1, 2]), t([1, 3]))",
    "ne_function": "out = T.ne(t([1, 2]), t([1, 3]))",
    "eq_method": "out = t([1., 2.]).eq(t([1., 0.]))",
    "ne_method": "out = t([1., 2.]).ne(2.0)",
    "eq_no_grad": "a = t([1., 2.], requires_grad=True); out = (a == 1).requires_grad",
    "eq_dtype": "out = (t([1., 2.]) == 1).dtype",
    "bool_single": "out = bool(t([1.]) == t([1.]))",
    "bool_many_raises": "out = bool(t([1., 2.]) == t([1., 2.]))",
    "in_list_raises": "a = t([1., 2.]); out = a in [t([3., 4.]), a]",
    "dict_key": "a, b = t([1., 2.]), t([1., 2.]); d = {a: 1, b: 2}; out = (d[a], d[b], len(d))",
    "set_member": "a, b = t([1., 2.]), t([1., 2.]); out = (len({a, b, a}), a in {a}, b in {a})",
    "lt_gt": "a = t([1., 2., 3.]); out = (a < 2, a <= 2, a > 2, a >= 2)",
    "lt_functions": "a = t([1., 2.]); out = (T.lt(a, 2), T.le(a, 1), T.gt(a, 1), T.ge(a, 2))",
    "mask_sum": "a = t([1., -2., 3.]); out = (a > 0).sum()",
    "mask_long": "a = t([1., -2., 3.]); out = (a > 0).long()",
    # max / min of two tensors, maximum / minimum
    "max_two": "out = T.max(t([1., 5., 3.]), t([2., 4., 3.]))",
    "min_two": "out = T.min(t([1., 5., 3.]), t([2., 4., 3.]))",
    "max_method_two": "out = t([1., 5.]).max(t([2., 4.]))",
    "maximum": "out = T.maximum(t([1., 5.]), t([2., 4.]))",
    "minimum": "out = T.minimum(t([1, 5]), t([2, 4]))",
    "maximum_method": "out = t([1., 5.]).maximum(t([2., 4.]))",
    "minimum_method": "out = t([1., 5.]).minimum(t([2., 4.]))",
    "maximum_broadcast": "out = T.maximum(t([[1.], [5.]]), t([2., 4., 3.]))",
    "maximum_mixed": "out = T.maximum(t([1, 5]), t([2.5, 4.]))",
    "maximum_grad": "a, b = t([1., 5., 3.], requires_grad=True), t([2., 4., 3.], "
                    "requires_grad=True); T.maximum(a, b).sum().backward(); out = (a.grad, b.grad)",
    "max_two_grad": "a, b = t([1., 5.], requires_grad=True), t([2., 4.], requires_grad=True); "
                    "T.max(a, b).sum().backward(); out = (a.grad, b.grad)",
    # dtypes: torch's type promotion
    "arange_div": "out = T.arange(5) / 2",
    "int_div_int": "out = t([3, 4]) / t([2, 2])",
    "int_floordiv": "out = t([7, -7]) // 2",
    "int_mod": "out = t([7, -7]) % 3",
    "float_floordiv": "out = t([7.5, -7.5]) // 2",
    "float_mod": "out = t([7.5, -7.5]) % 2",
    "int_plus_float": "out = t([1, 2]) + 0.5",
    "int_times_float_tensor": "out = t([1, 2]) * t([0.5, 0.25])",
    "int64_plus_float64": "out = t([1, 2]) + t([0.5], dtype=T.float64)",
    "bool_plus_int": "out = t([True, False]) + 1",
    "bool_plus_bool": "out = t([True, False]) + t([True, True])",
    "bool_times_float": "out = t([True, False]) * 2.5",
    "float32_scalar": "out = (t([1., 2.]) * 2.5).dtype",
    "float32_np_scalar": "out = (t([1., 2.]) * np.float64(2.5)).dtype",
    "float32_plus_0d_f64": "out = t([1., 2.]) + t(1.5, dtype=T.float64)",
    "int_plus_0d_f64": "out = t([1, 2]) + t(1.5, dtype=T.float64)",
    "f32_plus_f64": "out = t([1., 2.]) + t([1., 2.], dtype=T.float64)",
    "int32_plus_int64_0d": "out = t([1, 2], dtype=T.int32) + t(3)",
    "uint8_plus_int8": "out = t([1, 2], dtype=T.uint8) + t([1, 1], dtype=T.int8)",
    "int_pow_int": "out = t([2, 3]) ** 2",
    "int_pow_float": "out = t([2, 3]) ** 0.5",
    "int_rpow": "out = 2 ** t([1, 3])",
    "int_neg_pow_raises": "out = t([2, 3]) ** t([-1, 1])",
    "rsub": "out = 1 - t([0.25, 0.5])",
    "rdiv_int": "out = 1 / t([2, 4])",
    "rfloordiv": "out = 7 // t([2, 3])",
    "rmod": "out = 7 % t([2, 3])",
    "true_divide_zero": "out = t([1., -1., 0.]) / 0",
    "int_div_zero": "out = t([1, -1, 0]) / 0",
    "int_floordiv_zero_raises": "out = t([1, 2]) // 0",
    "neg_int": "out = -t([1, -2])",
    "abs_int": "out = abs(t([-1, 2]))",
    "abs_float": "out = abs(t([-1.5, 2.]))",
    "pos": "out = +t([-1.5, 2.])",
    "bool_sub_raises": "out = t([True]) - t([False])",
    "bool_neg_raises": "out = -t([True, False])",
    "invert_bool": "out = ~t([True, False])",
    "invert_int": "out = ~t([1, 2])",
    "invert_float_raises": "out = ~t([1., 2.])",
    "and_bool": "out = t([True, False]) & t([True, True])",
    "or_bool": "out = t([True, False]) | t([False, False])",
    "xor_int": "out = t([5, 3]) ^ t([1, 1])",
    "and_float_raises": "out = t([1.]) & t([1.])",
    "mask_and": "a = t([1., 2., 3.]); out = a[(a > 1) & (a < 3)]",
    "matmul": "out = t([[1., 2.]]) @ t([[3.], [4.]])",
    "matmul_mixed_raises": "out = t([[1., 2.]]) @ t([[3], [4]])",
    "iadd_keeps_object": "a = t([1., 2.]); b = a; a += 1; out = (b, a is b)",
    "imul_int_by_float_raises": "a = t([1, 2]); a *= 1.5; out = a",
    "idiv_int_raises": "a = t([1, 2]); a /= 2; out = a",
    "ifloordiv": "a = t([7, 8]); a //= 2; out = a",
    "imod": "a = t([7., 8.]); a %= 3; out = a",
    "ipow": "a = t([2., 3.]); a **= 2; out = a",
    "iand": "a = t([True, True]); a &= t([True, False]); out = a",
    "iadd_uint8": "a = t([250], dtype=T.uint8); a += t([1]); out = a",
    "iadd_f32_f64": "a = t([1., 2.]); a += t([0.5], dtype=T.float64); out = a",
    "sum_bool": "out = t([True, True, False]).sum()",
    "mean_int_raises": "out = t([1, 2]).mean()",
    "where_scalar": "out = T.where(t([True, False]), t([1, 2]), 0.5)",
    "where_grad": "a = t([1., -2., 3.], requires_grad=True); T.where(a > 0, a * 2, a * 0)"
                  ".sum().backward(); out = a.grad",
    "remainder_grad": "a, b = t([5., -5.], requires_grad=True), t([3., 3.], requires_grad=True); "
                      "(a % b).sum().backward(); out = (a.grad, b.grad)",
    "div_grad_mixed": "a, b = t([1., 2.], requires_grad=True), t([2., 4.], dtype=T.float64, "
                      "requires_grad=True); y = a / b; y.sum().backward(); "
                      "out = (y.dtype, a.grad, b.grad)",
    "mul_grad_0d": "a, b = t([1., 2.], requires_grad=True), t(3., requires_grad=True); "
                   "(a * b).sum().backward(); out = (a.grad, b.grad)",
    # issue 42's missing habits
    "einsum_bmm": "out = T.einsum('bij,bjk->bik', t(R(2, 3, 4)), t(R(2, 4, 5)))",
    "einsum_transpose": "out = T.einsum('ij->ji', t(R(3, 4)))",
    "einsum_implicit": "out = T.einsum('ij,jk', t(R(2, 3)), t(R(3, 4)))",
    "einsum_ellipsis": "out = T.einsum('...c,c->...', t(R(2, 3, 4)), t(R(4)))",
    "einsum_outer": "out = T.einsum('i,j->ij', t([1., 2.]), t([3., 4., 5.]))",
    "einsum_list": "out = T.einsum('ij,jk->ik', [t(R(2, 3)), t(R(3, 2))])",
    "einsum_grad": "a = t(R(2, 3), requires_grad=True); T.einsum('ij,ij->', a, a).backward(); "
                   "out = a.grad",
    "isfinite": "out = T.isfinite(t([1., float('inf'), float('nan'), -2.]))",
    "isfinite_method": "out = t([1., float('-inf')]).isfinite()",
    "isfinite_int": "out = T.isfinite(t([1, 2]))",
    "isnan": "out = T.isnan(t([1., float('nan')]))",
    "isinf": "out = T.isinf(t([1., float('-inf')]))",
    "repeat": "out = t([[1, 2], [3, 4]]).repeat(2, 3)",
    "repeat_new_dims": "out = t([1., 2.]).repeat(2, 1, 2)",
    "repeat_tuple": "out = t([1., 2.]).repeat((3,))",
    "repeat_grad": "a = t([1., 2.], requires_grad=True); (a.repeat(3) * "
                   "t([1., 2., 3., 4., 5., 6.])).sum().backward(); out = a.grad",
    "repeat_too_few_raises": "out = t([[1., 2.]]).repeat(2)",
    "masked_fill": "a = t([1., 2., 3.]); out = a.masked_fill(a > 1, -1.0)",
    "masked_fill_int": "a = t([1, 2, 3]); out = a.masked_fill(a > 1, 7)",
    "masked_fill_broadcast": "a = t(R(2, 3)); out = a.masked_fill(t([True, False, True]), 0.)",
    "masked_fill_inf": "a = t([1., 2.]); out = T.softmax(a.masked_fill(t([False, True]), "
                       "float('-inf')), dim=0)",
    "masked_fill_": "a = t([1., 2., 3.]); a.masked_fill_(a < 2, 0.); out = a",
    "masked_fill_grad": "a = t([1., 2., 3.], requires_grad=True); (a.masked_fill(t([True, False, "
                        "False]), 5.) * 2).sum().backward(); out = a.grad",
    "masked_fill_float_mask_raises": "out = t([1., 2.]).masked_fill(t([1., 0.]), 0.)",
    "setitem_row": "x = T.zeros(2, 3); x[0, :] = 5; out = x",
    "setitem_mask": "x = t([1., -2., 3.]); x[x < 0] = 0; out = x",
    "setitem_tensor": "x = T.zeros(2, 3); x[:, 1] = t([7., 8.]); out = x",
    "setitem_int_cast": "x = T.zeros(3, dtype=T.long); x[1] = 2.7; out = x",
    "setitem_index_list": "x = T.zeros(4); x[[0, 2]] = 1.; out = x",
    "setitem_leaf_raises": "x = T.zeros(3, requires_grad=True); x[0] = 1.; out = x",
    "setitem_leaf_no_grad": "x = T.zeros(3, requires_grad=True)\nwith T.no_grad():\n    x[0] = 1.\n"
                            "out = (x, x.is_leaf, x.requires_grad)",
    "setitem_grad": "w = t([1., 2., 3.], requires_grad=True); v = t(5., requires_grad=True); "
                    "y = w * 2; y[1] = v * 3; (y * t([1., 2., 3.])).sum().backward(); "
                    "out = (y, w.grad, v.grad)",
    "setitem_grad_slice": "w = t(R(3, 4), requires_grad=True); v = t(R(4), requires_grad=True); "
                          "y = w * 2; y[1:] = v; y.sum().backward(); out = (w.grad, v.grad)",
    "setitem_bad_shape_raises": "x = T.zeros(2, 3); x[0] = t([1., 2.]); out = x",
    "flip": "out = T.flip(T.arange(6).reshape(2, 3), [1])",
    "flip_method": "out = t([[1., 2.], [3., 4.]]).flip(0)",
    "flip_dims_tuple": "out = T.arange(8).reshape(2, 2, 2).flip((0, 2))",
    "flip_grad": "a = t([1., 2., 3.], requires_grad=True); (a.flip(0) * t([1., 2., 3.])).sum()"
                 ".backward(); out = a.grad",
    "roll": "out = T.roll(T.arange(5), 2)",
    "roll_dims": "out = T.arange(6).reshape(2, 3).roll(1, 1)",
    "roll_two_dims": "out = T.roll(T.arange(6).reshape(2, 3), (1, -1), (0, 1))",
    "is_contiguous": "x = T.zeros(2, 3); out = (x.is_contiguous(), x.t().is_contiguous(), "
                     "x.t().contiguous().is_contiguous())",
    "instance_norm": "m = nn.InstanceNorm2d(3); out = m(t(R(2, 3, 4, 4)))",
    "instance_norm_affine_keys": "out = sorted(nn.InstanceNorm2d(3, affine=True).state_dict())",
    "instance_norm_stats_keys": "out = sorted(nn.InstanceNorm2d(3, track_running_stats=True)"
                                ".state_dict())",
    "module_dict": "d = nn.ModuleDict({'a': nn.Linear(2, 3), 'b': nn.ReLU()}); "
                   "out = (list(d.keys()), sorted(d.state_dict()), 'a' in d, len(d))",
    "module_dict_params": "d = nn.ModuleDict({'a': nn.Linear(2, 3)}); d['c'] = nn.Linear(3, 1); "
                          "out = [tuple(p.shape) for p in d.parameters()]",
    "mha_keys": "out = list(nn.MultiheadAttention(8, 2).state_dict())",
    "mha_shapes": "m = nn.MultiheadAttention(8, 2); out = [tuple(v.shape) for v in "
                  "m.state_dict().values()]",
    "mha_forward": "m = nn.MultiheadAttention(4, 2); sd = {k: t(R(*v.shape)) for k, v in "
                   "m.state_dict().items()}; m.load_state_dict(sd); q = t(R(3, 2, 4)); "
                   "out = m(q, q, q)",
    "mha_batch_first": "m = nn.MultiheadAttention(4, 2, batch_first=True); sd = {k: t(R(*v.shape))"
                       " for k, v in m.state_dict().items()}; m.load_state_dict(sd); "
                       "q = t(R(2, 3, 4)); out = m(q, q, q, need_weights=False)[0]",
    "embedding": "e = nn.Embedding(5, 3); e.load_state_dict({'weight': t(R(5, 3))}); "
                 "out = e(t([[0, 4], [2, 2]]))",
    "embedding_padding": "e = nn.Embedding(5, 3, padding_idx=0); out = e.weight[0]",
    "embedding_grad": "e = nn.Embedding(4, 2, padding_idx=1); e(t([1, 2, 2])).sum().backward(); "
                      "out = e.weight.grad",
    "unfold": "out = F.unfold(t(R(1, 2, 4, 5)), 3, padding=1)",
    "unfold_stride": "out = F.unfold(t(R(2, 1, 6, 6)), (2, 3), stride=2, dilation=(1, 2))",
    "fold": "out = F.fold(t(R(1, 8, 12)), (4, 5), 2)",
    "fold_unfold_counts": "out = F.fold(F.unfold(T.ones(1, 1, 4, 4), 2), (4, 4), 2)",
    "unfold_grad": "a = t(R(1, 1, 3, 3), requires_grad=True); F.unfold(a, 2).sum().backward(); "
                   "out = a.grad",
    "nn_functional_import": "import importlib; out = importlib.import_module(T.__name__ + "
                            "'.nn.functional').relu(t([-1., 2.]))",
    "nn_functional_attr": "out = T.nn.functional.softmax(t([1., 2.]), dim=0)",
    "one_cycle": "o = T.optim.SGD([T.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9); "
                 "s = T.optim.lr_scheduler.OneCycleLR(o, max_lr=1., total_steps=10); lrs = []\n"
                 "for _ in range(9):\n    lrs.append(o.param_groups[0]['lr']); o.step(); s.step()\n"
                 "out = (lrs, o.param_groups[0]['momentum'])",
    "one_cycle_past_end_raises": "o = T.optim.SGD([T.zeros(1, requires_grad=True)], lr=0.1); "
                                 "s = T.optim.lr_scheduler.OneCycleLR(o, max_lr=1., total_steps=2, "
                                 "cycle_momentum=False)\nfor _ in range(3):\n    o.step(); s.step()"
                                 "\nout = 0",
    "lambda_lr": "o = T.optim.SGD([T.zeros(1, requires_grad=True)], lr=0.1); "
                 "s = T.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1)); lrs = []\n"
                 "for _ in range(4):\n    lrs.append(o.param_groups[0]['lr']); o.step(); s.step()\n"
                 "out = lrs",
    "load_kwargs": "import tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'w.pth'); "
                   "T.save({'w': T.ones(2)}, p); d = T.load(p, map_location='cpu', "
                   "weights_only=True); out = d['w']",
    "load_map_location_fn": "import tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'w.pth'); "
                            "T.save({'w': T.ones(2)}, p); out = T.load(p, map_location=lambda s, "
                            "l: s)['w']",
    "autograd_grad": "x = t([1., 2.], requires_grad=True); y = (x ** 3).sum(); "
                     "out = (T.autograd.grad(y, x), x.grad)",
    "autograd_grad_outputs": "x = t([1., 2.], requires_grad=True); y = x * 3; "
                             "out = T.autograd.grad(y, [x], grad_outputs=t([1., 10.]))",
    "autograd_grad_unused": "x, u = t([1.], requires_grad=True), t([1.], requires_grad=True); "
                            "out = T.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)",
    "autograd_grad_unused_raises": "x, u = t([1.], requires_grad=True), t([1.], "
                                   "requires_grad=True); out = T.autograd.grad((x * 2).sum(), [u])",
    "tensor_dataset": "from importlib import import_module; D = import_module(T.__name__ + "
                      "'.utils.data'); ds = D.TensorDataset(T.arange(6), T.arange(6) * 2); "
                      "out = (len(ds), ds[2])",
    "random_split_sizes": "from importlib import import_module; D = import_module(T.__name__ + "
                          "'.utils.data'); out = [len(s) for s in D.random_split(range(10), "
                          "[0.5, 0.3, 0.2])]",
    "subset": "from importlib import import_module; D = import_module(T.__name__ + "
              "'.utils.data'); out = [D.Subset(list('abcde'), [4, 0])[i] for i in range(2)]",
    "dataloader_alias": "from importlib import import_module; D = import_module(T.__name__ + "
                        "'.utils.data'); ds = D.TensorDataset(T.arange(4.)); "
                        "out = [b for (b,) in D.DataLoader(ds, batch_size=2)][1]",
    "cudnn_benchmark": "T.backends.cudnn.benchmark = True; out = T.backends.cudnn.benchmark",
    "cudnn_import": "from importlib import import_module; c = import_module(T.__name__ + "
                    "'.backends.cudnn'); c.deterministic = True; out = c.deterministic",
}

# probes whose srgrad result differs from torch's on purpose: README's "differ on purpose" table
# has each (the key it is found by in the README)
DIFFERS = {
    "max_dim_values_only": ("out = t([[1., 5.], [3., 2.]]).max(1)", "`x.max(dim)`"),
    "maximum_number": ("out = T.maximum(t([1., 5.]), 2.)", "`maximum(x, 2.0)`"),
    "dataloader_yields": ("from importlib import import_module; D = import_module(T.__name__ + "
                          "'.utils.data'); out = type(next(iter(D.DataLoader([1., 2.])))).__name__",
                          "`DataLoader` yields tensors"),
    "inplace_on_saved_output": ("w = t(R(3, 4), requires_grad=True); y = w.exp(); y[1:] = 0.; "
                                "y.sum().backward(); out = w.grad", "`y = x.exp(); y[1:] = v`"),
    "grad_create_graph": ("x = t([1., 2.], requires_grad=True); "
                          "out = T.autograd.grad((x ** 3).sum(), x, create_graph=True)",
                          "`autograd.grad(..., create_graph=True)`"),
    "sigmoid_int": ("out = T.sigmoid(t([1, 2]))", "`sigmoid`, `relu`, `softmax`, ... of an int"),
    "mha_kdim": ("out = list(nn.MultiheadAttention(4, 2, kdim=3).state_dict())", "kdim=..."),
}


def _plain(x):
    """A result in comparable form: arrays for tensors, names for dtypes, recursively."""
    import torch
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    if isinstance(x, sg.Tensor):
        return x.numpy()
    if isinstance(x, torch.dtype):
        return str(x).replace("torch.", "").replace("bool", "bool_")
    if isinstance(x, (type, np.dtype)) and x is not bool:
        try:
            return np.dtype(x).name.replace("bool", "bool_")
        except TypeError:
            return x
    if isinstance(x, (tuple, list)):
        return [_plain(v) for v in x]
    return x


def _same(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.allclose(
            a.astype(np.float64), b.astype(np.float64), rtol=1e-5, atol=1e-6, equal_nan=True)
    if isinstance(a, float) or isinstance(b, float):
        return np.isclose(a, b, rtol=1e-6)
    return a == b


def _run_probe(lib, code):
    import torch
    rng = np.random.default_rng(0)
    ns = {"T": lib, "np": np, "nn": lib.nn, "F": lib.nn.functional,
          "R": lambda *s: rng.standard_normal(s).astype(np.float32),
          "t": lib.tensor}
    if lib is torch:
        torch.manual_seed(0)
    try:
        exec(code, ns)  # noqa: S102 (the probes above, written here)
    except Exception as e:  # noqa: BLE001 (a probe compares whether both refuse)
        return None, e
    return _plain(ns["out"]), None


@pytest.mark.parametrize("name", PROBES)
def test_torch_habit_probe(name):
    torch = pytest.importorskip("torch")
    (ours, err), (theirs, terr) = _run_probe(sg, PROBES[name]), _run_probe(torch, PROBES[name])
    assert (err is None) == (terr is None), f"srgrad: {err!r}; torch: {terr!r}"
    assert err is not None or _same(ours, theirs), f"srgrad: {ours!r}\ntorch: {theirs!r}"


@pytest.mark.parametrize("name", DIFFERS)
def test_deliberate_difference_is_real_and_documented(name):
    torch = pytest.importorskip("torch")
    code, key = DIFFERS[name]
    (ours, err), (theirs, terr) = _run_probe(sg, code), _run_probe(torch, code)
    assert not ((err is None) == (terr is None) and (err is not None or _same(ours, theirs)))
    from pathlib import Path
    table = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    table = table[table.index("differ on purpose"):]
    assert key in table[:table.index("\n\n", table.index("| torch |"))]


def test_there_are_enough_probes():
    assert len(PROBES) + len(DIFFERS) >= 130
PROBES.update({
    "any_all": "a = t([1., -2., 3.]); out = ((a > 0).any(), (a > 0).all(), (a == a).all())",
    "any_dim": "out = T.any(t([[True, False], [False, False]]), dim=1)",
    "all_keepdim": "out = t([[1, 0], [1, 1]]).all(dim=0, keepdim=True)",
    "nonzero": "out = T.nonzero(t([[0., 1.], [2., 0.]]))",
    "nonzero_tuple": "out = t([0, 3, 0, 4]).nonzero(as_tuple=True)",
    "count_nonzero": "out = T.count_nonzero(t([[0., 1.], [2., 3.]]), dim=1)",
    "cat_promotes": "out = T.cat([t([1, 2]), t([0.5])])",
    "clamp_tensor_bound": "out = T.clamp(t([0.5, 3.]), min=t([1., 1.]), max=t([2., 2.]))",
    "exp_int": "out = T.exp(t([0, 1]))",
    "where_one_arg": "out = T.where(t([[0., 1.], [2., 0.]]) > 0)",
})
PROBES.update({
    "einsum_diagonal": "out = T.einsum('ii->i', t(R(3, 3)))",
    "einsum_trace": "a = t(R(3, 3), requires_grad=True); y = T.einsum('ii', a); y.backward(); "
                    "out = (y, a.grad)",
    "unfold_unbatched": "out = F.unfold(t(R(2, 4, 4)), 2)",
    "fold_unbatched": "out = F.fold(t(R(8, 9)), (4, 4), 2)",
})
