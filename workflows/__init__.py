"""DAG generators: training iterations, data loading, scientific workflows, multi-job mixes.

Each generator returns a :class:`taskflow.TaskGraph`; this package imports only taskflow's model.
"""
