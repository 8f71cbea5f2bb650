"""SciPy's chapters, differentiable: ``cr.special``, ``cr.stats``, ``cr.integrate``."""
