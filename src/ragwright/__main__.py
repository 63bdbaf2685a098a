from ragwright.launcher import main

main()
