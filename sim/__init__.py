"""specmem.sim"""
