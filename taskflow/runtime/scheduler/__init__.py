"""The scheduler's side of the runtime, inside Dask's scheduler process: the taskflow scheduler
plugin (:mod:`.plugin`), the runs it holds (:mod:`.runs`), the adaptive scheduler's decisions
(:mod:`.adaptation`), what it reads of Dask's scheduler state (:mod:`.reading`), what it changes
there (:mod:`.patching`), and Dask's cost per task (:mod:`.overhead`). Installed by name from the
client."""
