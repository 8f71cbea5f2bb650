"""Floor 1: the tensor, thread state, dtypes, pytrees, errors, random generators, batched tensors, graph
nodes and saved values, views' bookkeeping, shape arithmetic, and the op registry with ``apply``."""
