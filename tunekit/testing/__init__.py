"""Test suites shipped with tunekit, for code that plugs into it.

``ClientConformance`` checks a device client against the contract the tuner relies on: a
backend's test module subclasses it, says how to make its client and two candidates, and
pytest runs every check (Optuna's ``optuna.testing`` is the model)::

    from tunekit.testing import ClientConformance, ConformanceKey

    class TestMyClient(ClientConformance):
        def make(self) -> MyClient:
            return MyClient()

        def candidates(self, client):
            inputs = lambda key: (np.arange(key.n, dtype=np.float64),)
            return [tk.Tunable("sum", np.sum), tk.Tunable("dot", lambda x: x @ np.ones_like(x))], inputs
"""

from tunekit.testing.client import ClientConformance, ConformanceKey

__all__ = ["ClientConformance", "ConformanceKey"]
