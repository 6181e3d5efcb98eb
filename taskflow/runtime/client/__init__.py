"""The client's side of the runtime, in the user's process: connecting to a cluster and installing
the scheduler plugin by name (:mod:`.session`), running a task graph (:mod:`.runner`) or Dask
collections (:mod:`.dask_collections`), measuring the cluster (:mod:`.calibrate`) and reporting a
run (:mod:`.report`). It never imports the scheduler's side: the two meet in
:mod:`taskflow.runtime.messages`."""
