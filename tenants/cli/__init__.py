"""`hf`, the tenant's command-line client of the HeteroFlow API (design §16.4). It imports nothing of Django: it is
an HTTP client (requests) with tables (rich), installed as a console script by `make install`."""
