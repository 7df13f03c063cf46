# Installs the dlscale binary, the library, its headers and a CMake package so
# an outside project can find_package(dlscale) and link dlscale::dlscale.
include(CMakePackageConfigHelpers)

install(TARGETS dlscale_lib EXPORT dlscaleTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS dlscale RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir runtime layers io)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/dlscale/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dlscale)

set(DLSCALE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlscale)
install(EXPORT dlscaleTargets NAMESPACE dlscale:: DESTINATION ${DLSCALE_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dlscaleConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlscaleConfig.cmake INSTALL_DESTINATION ${DLSCALE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlscaleConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dlscaleConfig.cmake ${PROJECT_BINARY_DIR}/dlscaleConfigVersion.cmake
  DESTINATION ${DLSCALE_CMAKE_DIR})
