from msprof.cli import main

main()
