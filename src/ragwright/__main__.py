from ragwright.cli import main

main()
