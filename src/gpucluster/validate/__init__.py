"""Run validation cases (published measurements) against the model."""

from gpucluster.callable_module import make_callable

make_callable(__name__, "gpucluster.validate.runner:run_file")   # gpucluster.validate(...) is the API function too
