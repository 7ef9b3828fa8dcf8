B
