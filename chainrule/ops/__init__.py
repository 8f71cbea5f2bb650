"""The op table: every primitive with its rules (VJP, JVP), FLOPs, saves, policies and batching rule.

The modules here hold primitives and nothing else, as JAX's ``lax``; NumPy's namespace, built on
them, is ``chainrule.numpy``. ``chainrule.core._registry`` holds the table itself (``PRIMITIVES``).
"""
