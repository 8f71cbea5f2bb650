"""Utilities: graph pictures (``cr.viz``), ``cr.save``/``cr.load``, timing."""
