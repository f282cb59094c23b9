// LarderImage: the image-data adapter on top of Larder's Storage.
// The types live in their own files: ImageFormat, ImageHeader, ImageKey, ImageCache.
