"""Solar mode: a torch creator given a traced tensor (``torch.zeros_like(x)``) is two graph nodes,
as in upstream's tracer (torchview 0.2.6/0.2.7): a function node reading x whose output nothing
reads (written), and the result as a fresh graph input of its own (read by whatever reads it
alone). docs/sol-model.md, solar convention 1c, gives the evidence against the official rows."""

from __future__ import annotations

import pytest
import torch

from solbench.sol.solar_graph import SolarGraphMode

from test_solar_conventions import T, make_problem, solar

#: y = x * 2 reads x ([4, 8]: 32). zeros_like(y): a layer whose operand y is an intermediate
#: (reads nothing) and whose output no layer reads (32 written); r is then a graph input.
#: `y > 0` ends in __setitem__ (no layer): its mask is a dead end (32 written). r[:, ::2] and
#: r[:, 1::2] read what they select (16 + 16); their sum is returned and read by nothing (16).
#: ones_like(w), w a model input [8]: reads w (8) and writes its output (8); z * 3 reads z, a
#: graph input, alone (8) and is written (8).
#: 32 + 32 + 32 + 16 + 16 + 16 + 8 + 8 + 8 + 8 = 176 elements.
#: The walk before this rule (zeros_like and ones_like plain layers, their results their own
#: outputs): 32 (x) + 32 (mask) + 16 (sum) + 8 (w) + 8 (z * 3) = 96.
REF = ("import torch\n"
       "def run(x, w):\n"
       "    y = x * 2\n"
       "    r = torch.zeros_like(y)\n"
       "    r[y > 0] = 1.0\n"
       "    z = torch.ones_like(w)\n"
       "    return r[:, ::2] + r[:, 1::2], z * 3\n")


def test_like_creator_of_a_traced_tensor_is_a_dead_end_and_a_fresh_input(tmp_path):
    p, wl = make_problem(tmp_path, "like", {"x": T([4, 8], "bfloat16"), "w": T([8], "bfloat16")},
                         {"s": T([4, 4], "bfloat16"), "z": T([8], "bfloat16")}, REF)
    c, b = solar(p, wl)
    g = c.solar_graph
    assert g.fused_elements() == 176
    assert b.bytes_model == 176 * 2
    names = [lay.name for lay in g.layers]
    assert names.count("zeros_like") == 1 and names.count("ones_like") == 1
    zl = g.layers[names.index("zeros_like")]
    assert not zl.consumed and zl.out_elems == 32 and zl.preds  # written; read nothing
    ol = g.layers[names.index("ones_like")]
    assert not ol.consumed and ol.in_elems == [8] and not ol.preds  # reads w, written
    gets = [lay for lay in g.layers if lay.name == "__getitem__"]
    assert [lay.in_elems for lay in gets] == [[16], [16]] and not any(lay.preds for lay in gets)


def test_creator_without_a_traced_tensor_is_only_a_fresh_input():
    # torch.zeros(3, 5) and zeros_like of an untraced tensor: no layer, the result is a graph
    # input: z * 2 reads it (15) and is written (15)
    m = SolarGraphMode()
    plain = torch.ones(3, 5)
    with m:
        z = torch.zeros_like(plain)
        y = z * 2
    assert [lay.name for lay in m.graph.layers] == ["mul"]
    assert m.graph.fused_elements() == 15 + 15
    del y


def test_the_rule_is_torchviews():
    # An independent check against the tracer itself: torchview records zeros_like(y) as a
    # function node (parent y's node) whose output tensor node has no child, and the reads of
    # the result come from a tensor node with no parent.
    tv = pytest.importorskip("torchview")
    nn = torch.nn

    class M(nn.Module):
        def forward(self, x):
            y = x * 2
            r = torch.zeros_like(y)
            r[y > 0] = 1.0
            return r[:, ::2] + r[:, 1::2]

    g = tv.draw_graph(M(), input_data=[torch.randn(4, 8)], depth=99, expand_nested=True,
                      roll=False, save_graph=False, hide_module_functions=False,
                      hide_inner_tensors=False)
    parents: dict[int, list] = {}
    children: dict[int, list] = {}
    nodes = {}
    for a, b in g.edge_list:
        nodes[id(a)], nodes[id(b)] = a, b
        children.setdefault(id(a), []).append(b)
        parents.setdefault(id(b), []).append(a)
    zl = [n for n in nodes.values() if n.name == "zeros_like"]
    assert len(zl) == 1
    (out,) = children[id(zl[0])]
    assert children.get(id(out), []) == []  # the function node's output: a dead end
    assert [p.name for p in parents[id(zl[0])]] == ["hidden-tensor"]  # it reads y (x * 2)
    gets = [n for n in nodes.values() if n.name == "__getitem__"]
    assert len(gets) == 2
    for gi in gets:
        (src,) = parents[id(gi)]
        assert parents.get(id(src), []) == []  # read from a parentless tensor node
        assert tuple(src.tensor_shape) == (4, 8)
