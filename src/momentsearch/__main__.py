from momentsearch.cli.main import main

main()
