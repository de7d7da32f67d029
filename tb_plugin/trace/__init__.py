"""Reading Kineto traces (`parse`) into the columnar tables the views use (`model`, `linking`;
which events are an accelerator's device activity: `accelerators`).

This file makes `tb_plugin.trace` a regular package: without it `find_packages` leaves the
folder out of a wheel, and `pip install .` (not `-e`) gave a plugin whose data routes all
failed with `ModuleNotFoundError: No module named 'tb_plugin.trace'`.
"""
