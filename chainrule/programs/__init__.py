"""Differentiable programs: implicit differentiation (``fixed_point``, ``root_solve``), score-function
estimators, and distributions."""
