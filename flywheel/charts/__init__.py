"""The flywheel's charts, by concept: kpis, tfom, loop, market and plan."""
