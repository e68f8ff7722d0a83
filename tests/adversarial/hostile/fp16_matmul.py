"""Hostile (precision downgrade): the fp32 matmul computed in fp16. 99.8% of elements pass the
upstream 1e-2 tolerance; its error against an fp64 truth is ~1000x the fp32 reference's."""
import torch


def run(a, b):
    return (a.half() @ b.half()).float()
