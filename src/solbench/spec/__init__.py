"""Formats: definitions, workloads, solutions and traces (pydantic v2), and their loaders."""

from .definition import Definition, TensorSpec
from .problem import Problem, load_definition, load_problem, load_solution, reference_solution
from .solution import Solution
from .trace import Correctness, Environment, Evaluation, Finding, Performance, Status, TimingStats, Trace
from .workload import Tolerance, Workload

__all__ = [
    "Definition", "TensorSpec", "Problem", "load_definition", "load_problem", "load_solution",
    "reference_solution", "Solution", "Correctness", "Environment", "Evaluation", "Finding",
    "Performance", "Status", "TimingStats", "Trace", "Tolerance", "Workload",
]
