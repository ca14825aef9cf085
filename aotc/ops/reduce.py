"""(being written)"""
OPS = []
