import json
import math

import numpy as np

from gpucluster.cli.render import print_json


def test_json_output_is_strict_and_infinite_numbers_are_null(capsys):
    print_json({"break_even_months": math.inf, "x": [1.5, float("nan"), np.float64(2.0)], "n": np.int64(3)})
    data = json.loads(capsys.readouterr().out)
    assert data == {"break_even_months": None, "x": [1.5, None, 2.0], "n": 3}
