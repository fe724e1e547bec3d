"""specmem.rtl"""
