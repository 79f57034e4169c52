# End-to-end tests (filled in below).
