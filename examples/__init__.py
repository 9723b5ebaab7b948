"""The example jobs, installed with crossover as crossover.examples: each runs by its file's name, from a checkout or
a wheel (trainables/job.py `named`).

    crossover predict --workload zoo --param arch=resnet50 --epochs 1
    crossover sweep --workload resnet_cifar --smoke --devices cpu

In a checkout, `--workload examples/zoo.py:workload` runs the same file by its path.
"""
