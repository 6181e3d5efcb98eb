"""The applications on top of the library: the ``taskflow`` command line, the benchmark suite, the
demo and the plots. Nothing below this package imports it."""
