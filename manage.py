#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")
    from heteroflow_site.configuration import run_management_command

    run_management_command(sys.argv)


if __name__ == "__main__":
    main()
