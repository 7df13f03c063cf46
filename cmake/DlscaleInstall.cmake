# Installs the dlscale binary, the library, its headers and a CMake package.
