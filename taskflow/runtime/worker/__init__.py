"""The workers' side of the runtime, in each Dask worker process: a task's call as it runs there
(:mod:`.calls`) and the worker plugin that records transfers, rates and CPU limits
(:mod:`.worker_plugin`)."""
