"""specmem.golden"""
