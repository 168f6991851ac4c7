from tenants.cli.main import main

raise SystemExit(main())
