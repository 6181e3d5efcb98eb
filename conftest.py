"""Collection for every test path (tests/ and the packages' doctests): the modules of real
training need PyTorch (the ``torch`` extra); where it is not installed their doctests are not
collected (tests/taskflow/training/test_torch_training.py says why it skips)."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore += ["workflows/torch_models.py", "workflows/torch_tasks.py"]
