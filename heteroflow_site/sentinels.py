class Keep:
    """Type of KEEP: the default of an optional service argument whose None is meaningful ("unlimited quota",
    "no dedicated tenant"), so that leaving the argument out keeps the current value."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = Keep()
