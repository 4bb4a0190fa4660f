echo skip; exit 77
