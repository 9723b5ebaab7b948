"""The checkout's top, read as one package by tools that read files.

Python never imports this file. A tool that finds modules by their folders (an editor's outline, a structure
viewer) follows sweeps/cli.py's `from ..analysis.cli import HelpFormatter` to analysis/cli.py only where the
folder above sweeps/ is a package too; this file makes it one. Python itself knows these folders as
crossover.sweeps, crossover.analysis and crossover.trainables (pyproject.toml's package-dir), and the wheel holds
them under crossover/.
"""
