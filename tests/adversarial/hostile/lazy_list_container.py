"""Hostile (lazy output, red-team review 2026-11-29): returns a list subclass whose __iter__ does
the work, so it runs when the harness unpacks the outputs after the clock stopped."""


class _Lazy(list):
    def __init__(self, a, b):
        super().__init__([None])
        self.a, self.b = a, b

    def __iter__(self):
        return iter([self.a @ self.b])

    def __len__(self):
        return 1


def run(a, b):
    return _Lazy(a, b)
