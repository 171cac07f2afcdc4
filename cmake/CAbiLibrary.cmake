# goldminer_c_abi_library(NAME SOURCE EXPORTS HEADER LIBS...): lib<NAME>.so built
# from SOURCE, a C ABI for ctypes and C/C++ callers. Only the functions the
# version script EXPORTS names are exported; the static libraries LIBS inside it
# stay hidden (--exclude-libs), so it coexists with any other copy of their
# symbols (nlohmann_json, OpenSSL, libstdc++) in the caller's process. Installed
# with its public HEADER (include/goldminer/...).
function(goldminer_c_abi_library name source exports header)
  add_library(${name} SHARED ${source})
  set_target_properties(${name} PROPERTIES
    OUTPUT_NAME ${name}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    VERSION 1.0.0
    SOVERSION 1
    LINK_DEPENDS ${exports})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PRIVATE ${ARGN} goldminer_warnings)
  target_link_options(${name} PRIVATE
    -Wl,--version-script=${exports} -Wl,--exclude-libs,ALL -Wl,--no-undefined)
  install(TARGETS ${name} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/goldminer)
endfunction()
