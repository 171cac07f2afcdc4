# Warnings for our own targets; -Werror only when GOLDMINER_WERROR is on (CI, development).
add_library(goldminer_warnings INTERFACE)
target_compile_options(goldminer_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
  -Woverloaded-virtual -Wimplicit-fallthrough -Wformat=2)
if(GOLDMINER_WERROR)
  target_compile_options(goldminer_warnings INTERFACE -Werror)
endif()
