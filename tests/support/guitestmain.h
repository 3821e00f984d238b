#pragma once

#include <QApplication>
#include <QQuickWindow>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

// main() of a GUI test: widgets and the QML timeline under the offscreen platform, which needs
// the software scene graph. The console's settings are the process's own: ctest runs two GUI
// tests at once, and one clearing the shared test-mode file emptied the other's.
#define AGENTDECK_GUI_TEST_MAIN(TestClass)                                                         \
    int main(int argc, char *argv[])                                                               \
    {                                                                                              \
        QQuickWindow::setGraphicsApi(QSGRendererInterface::Software);                              \
        QApplication app(argc, argv);                                                              \
        QTemporaryDir settings;                                                                    \
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settings.path());        \
        TestClass test;                                                                            \
        return QTest::qExec(&test, argc, argv);                                                    \
    }

// The start of a GUI test's initTestCase(): skipped without the binary whose sandboxes its
// servers run, and the console's own paths in test mode (the layout a test leaves is neither
// the next one's nor the developer's).
#define AGENTDECK_GUI_TEST_INIT()                                                                  \
    do {                                                                                           \
        if (qEnvironmentVariableIsEmpty("AGENTDECK_BINARY"))                                       \
            QSKIP("needs AGENTDECK_BINARY for real sandboxes; run via ctest");                     \
        QStandardPaths::setTestModeEnabled(true);                                                  \
    } while (false)
