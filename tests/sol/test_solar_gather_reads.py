"""Solar mode: a gather by an integer index tensor reads from its table only what it selects, as
indexing does (convention 4 of docs/sol-model.md): ``F.embedding(ids, table)`` takes its table
as the second operand, so the rule for ``x[idx]`` (first operand) missed it and the whole table
was counted. Quant/008 (nvfp4 multimodal embedding projection: a [151936, 8192] bf16 text
embedding table, 1,024 ids) was 40-79x its official rows for it (the whole table, 622 MB at
0.5 B = 81 us against an official 1.04-2.07 us); with the rule 1.07-1.33x."""

from __future__ import annotations

from test_solar_conventions import T, make_problem, solar

#: ids [2, 3] int64 (6), table [64, 8] (512). The embedding layer reads ids (6) and the 6 rows it
#: selects (6 x 8 = 48), and writes its output, read by no layer (48): 102 elements. Before: the
#: whole table, 6 + 512 + 48 = 566.
EMBED = ("import torch\n"
         "def run(ids, table):\n"
         "    return torch.nn.functional.embedding(ids, table)\n")

#: torch.gather is no row gather: x [4, 8] is read whole (32), idx [4, 2] (8), the output (8)
#: written: 48 elements. L2/011's official rows count the whole of its routing_probs here
#: (reading only the gathered elements moves its 16 rows from 0.96-0.97 to 0.93-0.95).
GATHER = ("import torch\n"
          "def run(x, idx):\n"
          "    return torch.gather(x, 1, idx)\n")


def test_embedding_reads_the_rows_its_ids_select(tmp_path):
    p, wl = make_problem(tmp_path, "embed", {"ids": T([2, 3], "int64"), "table": T([64, 8], "bfloat16")},
                         {"y": T([2, 3, 8], "bfloat16")}, EMBED)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 6 + 48 + 48
    assert b.bytes_model == 102 * 2


def test_torch_gather_reads_its_whole_input(tmp_path):
    p, wl = make_problem(tmp_path, "gather", {"x": T([4, 8], "bfloat16"), "idx": T([4, 2], "int64")},
                         {"y": T([4, 2], "bfloat16")}, GATHER)
    c, b = solar(p, wl)
    assert c.solar_graph.fused_elements() == 32 + 8 + 8
    assert b.bytes_model == 48 * 2
