"""`python -m kchaos` is the `kchaos` command."""
from kchaos.harness.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
