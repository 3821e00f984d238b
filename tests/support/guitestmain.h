#pragma once

#include <QApplication>
#include <QQuickWindow>
#include <QTest>

// main() of a GUI test: widgets and the QML timeline under the offscreen platform, which needs
// the software scene graph.
#define AGENTDECK_GUI_TEST_MAIN(TestClass)                                                         \
    int main(int argc, char *argv[])                                                               \
    {                                                                                              \
        QQuickWindow::setGraphicsApi(QSGRendererInterface::Software);                              \
        QApplication app(argc, argv);                                                              \
        TestClass test;                                                                            \
        return QTest::qExec(&test, argc, argv);                                                    \
    }
